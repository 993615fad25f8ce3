"""The PyTorch twins of fresco's CIFAR-stem residual networks (models::resnet18 and models::small_resnet on
1-channel 28x28 inputs), shared by bench/device/pytorch_rn18_parity.py and pytorch_small_resnet.py: a 3x3
stem conv + BN + ReLU, two basic blocks per stage (a 1x1 conv + BN projection shortcut where the shape
changes), global average pool, fc."""
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (self.short(x) if self.short is not None else x))


def cifar_stem_resnet(stem, stages, in_channels=1, classes=10):
    """stages: (width, stride) per stage, two blocks each."""
    layers = [nn.Conv2d(in_channels, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU()]
    cin = stem
    for cout, stride in stages:
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def resnet18():
    return cifar_stem_resnet(64, ((64, 1), (128, 2), (256, 2), (512, 2)))


def small_resnet():
    return cifar_stem_resnet(32, ((32, 1), (64, 2), (128, 2)))
